"""Every file a run writes, as types: one pydantic model per file, each carrying
`schema_version` (`base.RunFile`). `kafka_recon.runfolder.RunFolder` names the files and reads
and writes them; the steps take and return these models, never bare dictionaries.

    stage.json, staged/<tier>.json   stage      what each SQL and Flume tier counted
    audit.json                       audit      the cluster's and clients' risks
    flight.json                      flight     the flight recorder's timeline per topic
    connectors.json                  connectors each Kafka Connect connector's config, status
                                                and offsets, as its REST API gave them
    bands.json                       bands      each tier's expected volume per bucket, from
                                                the flow's history
    replays.json                     replays    each topic's replays and offsets
    reconcile.json                   aggregates each point's and hop's counts, and evidence
    validation.json                  validation the Great Expectations suites' outcome
    alerts.json                      alerts     what each Slack or PagerDuty alert did
    timings.json                     timings    seconds and Spark jobs per step
    steps/<step>.json                journal    the run's journal, an entry per step
    result.json                      (kafka_recon.result.model: the contract owners read)
"""
