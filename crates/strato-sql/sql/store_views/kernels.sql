-- kernels over a partitioned store read by another engine (Spark, DuckDB: the store's
-- spans.parquet files as the table `spans`, with the partition columns job, host, rank).
-- Same columns and rows as the kernels view of `strato sql`: rank is the job's rank (the
-- partition's); device ops are the spans at a device level on a device queue (queue is set
-- only on device-queue tracks). For a store of several jobs, add `AND job = '...'`.
SELECT
  CAST(rank AS BIGINT) AS rank,
  device,
  queue AS stream,
  CAST(name AS STRING) AS name,
  start_ns,
  end_ns,
  CAST(level AS STRING) AS level,
  correlation
FROM spans
WHERE queue IS NOT NULL
  AND level IN ('DeviceKernel', 'DeviceCopy', 'DeviceSet')
