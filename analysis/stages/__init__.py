"""The pipeline, one module per stage, in the order a sweep runs them:
build (objects and binaries) -> count (one plan through its backend, analysis.backends) ->
collect (parse and rawcheck the raw files, subtract the size-0 baseline, one tidy table) ->
plot (figures, the paper's checks and their verdict; explain writes the cells the summary
discusses, and serves `./harness explain`). Each stage is also the entry point its
rule in rules/ calls (`python -m analysis.stages.<stage>`)."""
