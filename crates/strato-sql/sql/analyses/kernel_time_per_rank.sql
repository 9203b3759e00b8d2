-- kernel_time_per_rank: per rank, the device ops and their summed duration (concurrent
-- streams count twice): `strato kernels --json` ranks[].device_ops and device_time_ns.
-- Input: the kernels view. Portable: DataFusion and Spark SQL.
SELECT
  rank,
  COUNT(*) AS device_ops,
  SUM(end_ns - start_ns) AS device_time_ns
FROM kernels
GROUP BY rank
ORDER BY rank
