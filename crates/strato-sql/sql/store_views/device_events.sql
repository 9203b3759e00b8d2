-- device_events over a partitioned store read by another engine (see store_kernels): the
-- device events of `strato gpu-time`'s window, rank from the partition.
SELECT
  CAST(rank AS BIGINT) AS rank,
  device,
  queue AS stream,
  CAST(name AS STRING) AS name,
  start_ns,
  end_ns,
  CAST(level AS STRING) AS level
FROM spans
WHERE queue IS NOT NULL
  AND queue <> -1
  AND level IN ('DeviceKernel', 'DeviceCopy', 'DeviceSet', 'DeviceSync')
