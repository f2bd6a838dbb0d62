"""What every widget shares: the plotly view, playback controls, static pictures for readers
without a kernel, inline error messages, graph viewports, the program as a graph, and work
run in the background."""
