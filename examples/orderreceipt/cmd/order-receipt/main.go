// Command order-receipt runs the transactional-enqueue example against the
// local stack (`make run` in another shell): it places an order and its
// receipt job in one DynamoDB transaction, dispatches the job, waits for it
// to succeed, then shows that placing the same order again writes nothing.
//
//	go run ./examples/orderreceipt/cmd/order-receipt
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/examples/orderreceipt"
	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "order-receipt:", err)
		os.Exit(1)
	}
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context) error {
	ddb := localaws.DynamoDBClient("http://127.0.0.1:" + getenv("JOBS_LOCAL_DYNAMODB_PORT", "8000"))
	sqsClient := localaws.SQSClient("http://127.0.0.1:" + getenv("JOBS_LOCAL_SQS_PORT", "4566"))
	queueURL, err := sqsClient.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("lambdajobs-local")})
	if err != nil {
		return fmt.Errorf("is `make run` up? %w", err)
	}
	// The enqueue side needs only the kinds it enqueues.
	reg := jobs.NewRegistry()
	receipts := jobs.MustRegister(reg, examplekinds.Receipt, examplekinds.SendReceipt, nil)
	store := dynamostore.New(ddb, "lambdajobs-local", dynamostore.Config{})
	client, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Queue: sqsqueue.New(sqsClient, aws.ToString(queueURL.QueueUrl))})
	if err != nil {
		return err
	}
	svc := client.Service()
	if err := orderreceipt.CreateOrdersTable(ctx, ddb, "orders-local"); err != nil {
		return err
	}
	shop := &orderreceipt.Shop{DDB: ddb, OrdersTable: "orders-local", Jobs: svc, Store: store, Receipts: receipts, Owner: examplekinds.DefaultRouteOwner}

	order := orderreceipt.Order{ID: fmt.Sprintf("o-%d", time.Now().UnixNano()%1e6), Email: "ada@example.com", Cents: 4999}
	job, err := shop.PlaceOrder(ctx, order)
	if err != nil {
		return err
	}
	fmt.Printf("order %s and receipt job %s written in one transaction; job dispatched\n", order.ID, job.ID)
	for deadline := time.Now().Add(30 * time.Second); ; {
		rec, err := svc.Get(ctx, shop.Owner, job.ID)
		if err != nil {
			return err
		}
		if rec.Status.Final() {
			fmt.Printf("job %s: %s %s\n", rec.ID, rec.Status, rec.Result)
			if path, err := deploy.PathOf(deploy.RouteGetJob, map[string]string{"id": rec.ID}); err == nil {
				fmt.Printf("read it over HTTP: curl -s http://127.0.0.1:8080%s\n", path)
			}
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s still %s after 30s", rec.ID, rec.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := shop.PlaceOrder(ctx, order); !errors.Is(err, orderreceipt.ErrOrderExists) {
		return fmt.Errorf("placing the order again: %v, want ErrOrderExists", err)
	}
	fmt.Printf("placing order %s again: cancelled by the order's own condition; no second job, no message\n", order.ID)
	return nil
}
