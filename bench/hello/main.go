// Command hello is the cold-start baseline: the smallest aws-lambda-go
// function, built like the project's bootstraps.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context, map[string]any) (string, error) { return "hello", nil })
}
