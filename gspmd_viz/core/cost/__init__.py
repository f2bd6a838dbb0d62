"""What a split and a plan cost beyond bytes: work done twice, FLOPs, time on a chip, and
memory (what collectives stage, the buffers alive at once)."""
