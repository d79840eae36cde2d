package github

import (
	"database/sql"
	"encoding/json"
	"net/http"
)

var db *sql.DB

type starEvent struct {
	Repo  string `json:"repo"`
	Stars int    `json:"stars"`
}

// A webhook route with no marker: it relies on the write being harmless to repeat.
func githubWebhook(w http.ResponseWriter, r *http.Request) {
	var ev starEvent
	if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	_, _ = db.Exec("UPDATE repos SET stars = $1 WHERE name = $2", ev.Stars, ev.Repo)
	w.WriteHeader(http.StatusOK)
}

func Routes(mux *http.ServeMux) {
	mux.HandleFunc("/webhooks/github", githubWebhook)
}
