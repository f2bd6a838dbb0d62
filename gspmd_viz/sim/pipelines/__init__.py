"""Pipeline schedules as data, and when each of their actions runs."""
