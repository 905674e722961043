# Generated from internal/deploy (UPDATE_DOCS=1 go test ./internal/deploy): the deployment's functions.
FUNCTIONS := enqueue getjob waitjob cancel worker sweeper schedules
