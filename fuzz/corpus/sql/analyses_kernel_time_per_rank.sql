-- kernel_time_per_rank: per rank, the device ops and their summed duration (concurrent
-- streams count twice): `strato kernels --json` ranks[].device_ops and device_time_ns.
-- The sum is exact (DECIMAL(38, 0)) and saturates at BIGINT's maximum, as `strato kernels`
-- does (a BIGINT SUM wraps to a negative number on a few long spans).
-- Input: the kernels view. Portable: DataFusion and Spark SQL.
SELECT
  rank,
  COUNT(*) AS device_ops,
  CASE WHEN SUM(CAST(end_ns - start_ns AS DECIMAL(38, 0))) > 9223372036854775807
       THEN 9223372036854775807
       ELSE CAST(SUM(CAST(end_ns - start_ns AS DECIMAL(38, 0))) AS BIGINT) END AS device_time_ns
FROM kernels
GROUP BY rank
ORDER BY rank
