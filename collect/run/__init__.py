"""Running a campaign: the runner schedules configurations (`runner`), each configuration's run
starts its service and lands its units (`configuration`), the service lifecycle always stops
what it started (`service`), measured windows send the requests (`windows`), and `progress`
shows the live bar and ETA. `campaign` holds the state they share."""
