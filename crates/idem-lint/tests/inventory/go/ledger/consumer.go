package ledger

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
	"gorm.io/gorm"
)

type ProcessedEvent struct {
	ID string `gorm:"primaryKey"`
}

type Entry struct {
	ID      string
	Account string
	Amount  int64
}

type Account struct {
	ID      string
	Balance int64
}

var db *gorm.DB

// A JetStream consumer claiming each event in the transaction of its write.
func handleLedgerEntry(msg *nats.Msg) {
	var entry Entry
	if err := json.Unmarshal(msg.Data, &entry); err != nil {
		return
	}
	_ = db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&ProcessedEvent{ID: entry.ID}).Error; err != nil {
			return err
		}
		return tx.Model(&Account{}).Where("id = ?", entry.Account).Update("balance", entry.Amount).Error
	})
	msg.Ack()
}

func Start(js nats.JetStreamContext) error {
	_, err := js.Subscribe("ledger.entries", handleLedgerEntry, nats.Durable("ledger_v2"), nats.ManualAck())
	return err
}
