WITH k AS (SELECT rank, stream, name, start_ns, end_ns, lag(end_ns) OVER (PARTITION BY stream ORDER BY start_ns) AS prev_end FROM kernels)
SELECT stream, name, start_ns - coalesce(prev_end, start_ns) AS gap, row_number() OVER (ORDER BY start_ns) AS i FROM k
UNION ALL SELECT 0, 'x', 0, 0
