package payments

import (
	"context"
	"database/sql"

	"github.com/segmentio/kafka-go"
)

// A kafka-go reader loop with no marker: a message read again after a rebalance settles twice.
func run(ctx context.Context, db *sql.DB) error {
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{"k:9092"}, GroupID: "payments-reader", Topic: "payments"})
	for {
		m, err := reader.ReadMessage(ctx)
		if err != nil {
			return err
		}
		if _, err := db.Exec("UPDATE payments SET status = 'settled' WHERE id = $1", string(m.Key)); err != nil {
			return err
		}
	}
}
