"""One tensor's layout on a mesh: per-device blocks, the notations side by side, the live
sharding editor, and a matmul's operands and result as blocks with the collective drawn."""
