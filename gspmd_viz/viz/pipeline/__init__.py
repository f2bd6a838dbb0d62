"""Pipeline schedules as Gantt charts with activation memory, static and on a torus."""
