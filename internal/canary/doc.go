// Package canary holds the end-to-end test proving that protected values leak nowhere.
package canary
