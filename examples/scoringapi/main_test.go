package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestScoreAnswersOutputs(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(handler(slog.New(slog.DiscardHandler)))
	defer srv.Close()
	res, err := http.Post(srv.URL+"/score", "application/json", strings.NewReader(`{"occurrence_id":"x","inputs":{"crm_id":"CRM-1","country":"FR"}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Outputs struct {
			Score int    `json:"score"`
			Band  string `json:"band"`
		} `json:"outputs"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != 200 {
		t.Fatalf("%d %v", res.StatusCode, err)
	}
	if out.Outputs.Score < 0 || out.Outputs.Score > 100 || out.Outputs.Band == "" {
		t.Fatalf("outputs = %+v", out.Outputs)
	}
}
