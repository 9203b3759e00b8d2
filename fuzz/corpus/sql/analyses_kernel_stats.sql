-- kernel_stats: per rank and kernel name, count, total, min and max duration and the share
-- of the rank's device time: the rows of `strato kernels --json --top 0` ranks[].kernels
-- (ordered by total, longest first; ties by name). The shares of a rank add up to 1.
-- Sums are exact (DECIMAL(38, 0): a few long spans already pass BIGINT, whose SUM wraps);
-- a total past BIGINT saturates at its maximum, as `strato kernels` does.
-- Input: the kernels view. Portable: DataFusion and Spark SQL.
WITH per_name AS (
  SELECT
    rank,
    name,
    COUNT(*) AS count,
    SUM(CAST(end_ns - start_ns AS DECIMAL(38, 0))) AS total_exact,
    MIN(end_ns - start_ns) AS min_ns,
    MAX(end_ns - start_ns) AS max_ns
  FROM kernels
  GROUP BY rank, name
),
per_rank AS (
  SELECT rank, SUM(CAST(end_ns - start_ns AS DECIMAL(38, 0))) AS device_time_exact
  FROM kernels
  GROUP BY rank
)
SELECT
  p.rank,
  p.name,
  p.count,
  CASE WHEN p.total_exact > 9223372036854775807 THEN 9223372036854775807
       ELSE CAST(p.total_exact AS BIGINT) END AS total_ns,
  p.min_ns,
  p.max_ns,
  CASE WHEN r.device_time_exact > 0
       THEN CAST(p.total_exact AS DOUBLE) / CAST(r.device_time_exact AS DOUBLE)
       ELSE 0.0 END AS share
FROM per_name p
JOIN per_rank r ON p.rank = r.rank
ORDER BY p.rank, p.total_exact DESC, p.name
