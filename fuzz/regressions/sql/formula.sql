SELECT '=HYPERLINK("http://x")' AS cell
