-- kernel_stats: per rank and kernel name, count, total, min and max duration and the share
-- of the rank's device time: the rows of `strato kernels --json --top 0` ranks[].kernels
-- (ordered by total, longest first; ties by name). The shares of a rank add up to 1.
-- Input: the kernels view. Portable: DataFusion and Spark SQL.
WITH per_name AS (
  SELECT
    rank,
    name,
    COUNT(*) AS count,
    SUM(end_ns - start_ns) AS total_ns,
    MIN(end_ns - start_ns) AS min_ns,
    MAX(end_ns - start_ns) AS max_ns
  FROM kernels
  GROUP BY rank, name
),
per_rank AS (
  SELECT rank, SUM(end_ns - start_ns) AS device_time_ns
  FROM kernels
  GROUP BY rank
)
SELECT
  p.rank,
  p.name,
  p.count,
  p.total_ns,
  p.min_ns,
  p.max_ns,
  CASE WHEN r.device_time_ns > 0
       THEN CAST(p.total_ns AS DOUBLE) / CAST(r.device_time_ns AS DOUBLE)
       ELSE 0.0 END AS share
FROM per_name p
JOIN per_rank r ON p.rank = r.rank
ORDER BY p.rank, p.total_ns DESC, p.name
