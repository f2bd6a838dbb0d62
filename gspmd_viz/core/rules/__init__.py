"""What each primitive says about its dims: factor rules (einsum-like), the families that
build them, and one registry entry per primitive."""
