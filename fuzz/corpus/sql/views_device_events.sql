-- device_events: one row per device event of `strato gpu-time`'s window: spans of a device
-- level (kernel, copy, memset, device-side sync) on a device queue whose id is not -1.
SELECT
  CAST(COALESCE(r.rank, r.id) AS BIGINT) AS rank,
  s.device AS device,
  s.queue AS stream,
  CAST(s.name AS VARCHAR) AS name,
  s.start_ns AS start_ns,
  s.end_ns AS end_ns,
  CAST(s.level AS VARCHAR) AS level
FROM spans s
JOIN tracks t ON s.track = t.id
JOIN ranks r ON s.rank = r.id
WHERE CAST(t.kind AS VARCHAR) = 'DeviceQueue'
  AND s.queue <> -1
  AND CAST(s.level AS VARCHAR) IN ('DeviceKernel', 'DeviceCopy', 'DeviceSet', 'DeviceSync')
