-- gpu_busy: per rank, the device window (first device event's start to the last one's
-- end), the time some device event runs (the union of the events' intervals, over every
-- device and stream of the rank) and the idle rest: busy_ns + idle_ns = window_ns.
-- `strato gpu-time --json` ranks[]: device_events, window_start_ns, window_end_ns,
-- kernel_time_us = window_ns / 1000, idle_us = idle_ns / 1000.
-- The union is a gaps-and-islands pass: an event opens a new island when it starts after
-- every earlier event (by start) has ended.
-- Input: the device_events view. Portable: DataFusion and Spark SQL.
WITH ordered AS (
  SELECT
    rank,
    start_ns,
    end_ns,
    MAX(end_ns) OVER (
      PARTITION BY rank ORDER BY start_ns, end_ns
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS ended_before
  FROM device_events
),
numbered AS (
  SELECT
    rank,
    start_ns,
    end_ns,
    SUM(CASE WHEN ended_before IS NULL OR start_ns > ended_before THEN 1 ELSE 0 END) OVER (
      PARTITION BY rank ORDER BY start_ns, end_ns
      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS island
  FROM ordered
),
islands AS (
  SELECT rank, island, COUNT(*) AS events, MIN(start_ns) AS start_ns, MAX(end_ns) AS end_ns
  FROM numbered
  GROUP BY rank, island
)
SELECT
  rank,
  SUM(events) AS device_events,
  MIN(start_ns) AS first_start_ns,
  MAX(end_ns) AS last_end_ns,
  MAX(end_ns) - MIN(start_ns) AS window_ns,
  SUM(end_ns - start_ns) AS busy_ns,
  (MAX(end_ns) - MIN(start_ns)) - SUM(end_ns - start_ns) AS idle_ns
FROM islands
GROUP BY rank
ORDER BY rank
