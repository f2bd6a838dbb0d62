"""The collective ledger: every collective of a partitioned program on the edge that needs it,
what a plan costs, how sizes change, and which collectives cross a process boundary."""
