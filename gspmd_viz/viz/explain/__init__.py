"""gv.explain's report as a widget: the user's source with collectives on their lines."""
