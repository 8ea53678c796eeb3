"""The Spark steps, replay and reconcile, and the session every one of them uses."""
