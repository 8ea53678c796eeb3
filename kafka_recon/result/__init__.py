"""The result of a run: its typed contract (`model`) and how it is built from the aggregates
the reconcile step computed (`build`)."""
