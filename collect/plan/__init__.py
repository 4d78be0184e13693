"""Plans: what a campaign is, as the user writes it. `model` holds the pydantic plan (methods,
tensor-parallel sizes, phases, service configurations), `components` the host and engine
sections and the assumed speeds, `phases` the phase models, `file` loads YAML with errors that
name the field and the line, and `workloads` holds the prompt sources and workloads and turns
them into prompts and messages."""
