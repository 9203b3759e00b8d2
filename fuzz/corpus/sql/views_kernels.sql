-- kernels: one row per device op (kernel, copy, memset) on a device queue, the ops
-- `strato kernels` counts (device-side syncs excluded). rank is the job's rank (the source's
-- rank, else the rank's position in the profile); stream is the queue (CUDA stream).
SELECT
  CAST(COALESCE(r.rank, r.id) AS BIGINT) AS rank,
  s.device AS device,
  s.queue AS stream,
  CAST(s.name AS VARCHAR) AS name,
  s.start_ns AS start_ns,
  s.end_ns AS end_ns,
  CAST(s.level AS VARCHAR) AS level,
  s.correlation AS correlation
FROM spans s
JOIN tracks t ON s.track = t.id
JOIN ranks r ON s.rank = r.id
WHERE CAST(t.kind AS VARCHAR) = 'DeviceQueue'
  AND CAST(s.level AS VARCHAR) IN ('DeviceKernel', 'DeviceCopy', 'DeviceSet')
