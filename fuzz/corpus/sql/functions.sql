SELECT upper(CAST(name AS VARCHAR)), length(CAST(name AS VARCHAR)), regexp_replace(CAST(name AS VARCHAR), '[a-z]+', 'X', 'g'),
  substr(CAST(name AS VARCHAR), 2, 3), lpad('a', 5, '-'), repeat('ab', 3), round(CAST(end_ns - start_ns AS DOUBLE) / 3.0, 2),
  to_timestamp_nanos(start_ns), CASE WHEN end_ns > 100 THEN 'long' ELSE 'short' END, coalesce(NULL, 1), abs(-start_ns) % 7
FROM spans WHERE name IS NOT NULL AND start_ns IN (0, 10, 20, 50) ORDER BY 1
