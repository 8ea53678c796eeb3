"""What a run leaves for people: the report, the mail, the history, the validation."""
