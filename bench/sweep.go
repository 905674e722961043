package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/dev/awscount"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// sweepResult is what one sweep read with a table of finished jobs and a
// few stuck ones.
type sweepResult struct {
	Finished, Stuck int
	Due             int
	Interrupted     int
	Requests        map[string]int
	ReadUnits       float64
	WriteUnits      float64
	Took            time.Duration
}

func sweepCost(ctx context.Context, finished int) (sweepResult, error) {
	const stuck = 10
	res := sweepResult{Finished: finished, Stuck: stuck}
	p, err := localaws.StartDynamoDB(ctx, localaws.Options{})
	if err != nil {
		return res, err
	}
	defer p.Stop()
	ddb := localaws.DynamoDBClient(p.Endpoint)
	table := "bench-sweep"
	if _, err := ddb.CreateTable(ctx, dynamostore.CreateTableInput(table)); err != nil {
		return res, err
	}
	// The finished jobs, written as the final write leaves them: no sweep
	// attributes, so not in the index. 25 per BatchWriteItem, 4 writers.
	now := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := w * 25; start < finished; start += 100 {
				var reqs []ddbtypes.WriteRequest
				for i := start; i < min(start+25, finished); i++ {
					item, _ := attributevalue.MarshalMap(map[string]any{
						"id": wire.NewID(), "kind": "example.hash", "owner": "o", "status": "succeeded",
						"payload": `{"text":"x","rounds":1}`, "result": `{"sha256":"..."}`, "attempt": 1,
						"created_ms": now.UnixMilli(), "updated_ms": now.UnixMilli(), "finished_ms": now.UnixMilli(),
						"expires": now.Add(7 * 24 * time.Hour).Unix(),
					})
					reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: item}})
				}
				for len(reqs) > 0 {
					out, err := ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{table: reqs}})
					if err != nil {
						errs <- err
						return
					}
					reqs = out.UnprocessedItems[table]
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	// The stuck ones: claimed by workers that died, leases long over.
	plain := dynamostore.New(ddb, table, dynamostore.Config{})
	for i := range stuck {
		rec := jobstest.NewRecord(wire.NewID(), now.Add(-time.Hour))
		rec.Payload = []byte(`{"n":` + strconv.Itoa(i) + `}`)
		if err := plain.Create(ctx, rec); err != nil {
			return res, err
		}
		if _, err := plain.Claim(ctx, rec.ID, driver.Claim{Token: "dead", At: now.Add(-time.Hour), LeaseUntil: now.Add(-50 * time.Minute)}); err != nil {
			return res, err
		}
	}
	// One sweep, every request counted, every unit summed.
	counter := &awscount.Counter{}
	counted := localaws.DynamoDBClient(p.Endpoint, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, counter.APIOption) })
	var mu sync.Mutex
	store := dynamostore.New(counted, table, dynamostore.Config{OnCapacity: func(op string, cc *ddbtypes.ConsumedCapacity) {
		mu.Lock()
		defer mu.Unlock()
		if op == "get" || op == "due" {
			res.ReadUnits += aws.ToFloat64(cc.CapacityUnits)
		} else {
			res.WriteUnits += aws.ToFloat64(cc.CapacityUnits)
		}
	}})
	sweeper, err := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: store, Queue: &jobstest.MemQueue{}})
	if err != nil {
		return res, err
	}
	t := time.Now()
	rep, err := sweeper.Sweep(ctx)
	if err != nil {
		return res, err
	}
	res.Took = time.Since(t)
	res.Due, res.Interrupted, res.Requests = rep.Due, rep.Interrupted, counter.Counts()
	count, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), Select: ddbtypes.SelectCount})
	if err != nil {
		return res, err
	}
	if int(count.Count) < finished { // a Scan page holds at most 1 MB: enough to show the table is full
		fmt.Printf("bench: the table's first scan page holds %d items\n", count.Count)
	}
	return res, nil
}
