SELECT t.kind, CAST(s.name AS VARCHAR) AS name, count(*) AS n, sum(s.end_ns - s.start_ns) AS ns
FROM spans s JOIN tracks t ON s.track = t.id LEFT JOIN args a ON s.args_id = a.id
WHERE s.start_ns BETWEEN 0 AND 1000000 AND a.json LIKE '%correlation%'
GROUP BY 1, 2 HAVING count(*) > 0 ORDER BY ns DESC LIMIT 10
