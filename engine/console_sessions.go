package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/queries"
)

// ConsoleSession is one signed-in browser of the console as the database
// keeps it, under the SHA-256 of the id the browser holds: every replica
// serves it, and a replica's restart ends none.
type ConsoleSession struct {
	// TokenHash is the stored form of the token signed in with, looked up
	// at every request (its revocation ends the session).
	TokenHash []byte
	CSRF      string
	// Expires is when the session ends unless used; Ends when it ends
	// however used.
	Expires, Ends time.Time
	ReloadPaused  bool
	// HasFlash tells whether a notice waits for a page (TakeConsoleFlash).
	HasFlash bool
}

// consoleTouchEvery is how far a session's idle expiry may lag behind its
// last use: a use moves it only when it would move by more, one write a
// minute per active session rather than one per page (live pages reload
// every few seconds).
const consoleTouchEvery = time.Minute

// CreateConsoleSession stores a new session under key.
func (e *Engine) CreateConsoleSession(ctx context.Context, key, tokenHash []byte, csrf string, now, expires, ends time.Time) error {
	err := e.q.ConsoleSessionInsert(ctx, queries.ConsoleSessionInsertParams{Key: key, TokenHash: tokenHash, Csrf: csrf,
		Now: now, ExpiresAt: expires, EndsAt: ends})
	return wrap("create console session", err)
}

// ConsoleSession returns the session of key live at now, its idle expiry
// pushed back to expires (never past its end); found is false for a
// session that never was, ended or expired.
func (e *Engine) ConsoleSession(ctx context.Context, key []byte, now, expires time.Time) (s ConsoleSession, found bool, err error) {
	row, err := e.q.ConsoleSessionGet(ctx, queries.ConsoleSessionGetParams{Key: key, Now: now})
	if isNoRows(err) {
		return ConsoleSession{}, false, nil
	}
	if err != nil {
		return ConsoleSession{}, false, wrap("console session", err)
	}
	s = ConsoleSession{TokenHash: row.TokenHash, CSRF: row.Csrf, Expires: row.ExpiresAt, Ends: row.EndsAt,
		ReloadPaused: row.ReloadPaused, HasFlash: len(row.Flash) > 0 && string(row.Flash) != "null"}
	if expires.After(s.Ends) {
		expires = s.Ends
	}
	if expires.Sub(s.Expires) > consoleTouchEvery {
		if err := e.q.ConsoleSessionTouch(ctx, queries.ConsoleSessionTouchParams{Key: key, ExpiresAt: expires}); err != nil {
			return ConsoleSession{}, false, wrap("touch console session", err)
		}
		s.Expires = expires
	}
	return s, true, nil
}

// SetConsoleFlash keeps flash, a notice for the next page the session of
// key opens: a JSON object whose "page" is that page's path and whose
// "query", when not empty, its query string as url.Values.Encode writes it.
func (e *Engine) SetConsoleFlash(ctx context.Context, key []byte, flash json.RawMessage) error {
	return wrap("set console flash", e.q.ConsoleSessionSetFlash(ctx, queries.ConsoleSessionSetFlashParams{Key: key, Flash: flash}))
}

// TakeConsoleFlash returns and forgets the session's notice if it is for
// the page at path with query (encoded by url.Values.Encode); nil if none
// is.
func (e *Engine) TakeConsoleFlash(ctx context.Context, key []byte, path, query string) (json.RawMessage, error) {
	flash, err := e.q.ConsoleSessionTakeFlash(ctx, queries.ConsoleSessionTakeFlashParams{Key: key, Path: path, Query: query})
	if isNoRows(err) {
		return nil, nil
	}
	return flash, wrap("take console flash", err)
}

// SetConsoleReloadPaused pauses or resumes the auto-reload of the live
// pages of the session of key.
func (e *Engine) SetConsoleReloadPaused(ctx context.Context, key []byte, paused bool) error {
	return wrap("pause console reload", e.q.ConsoleSessionSetReloadPaused(ctx, queries.ConsoleSessionSetReloadPausedParams{Key: key, Paused: paused}))
}

// DeleteConsoleSession ends the session of key, if any.
func (e *Engine) DeleteConsoleSession(ctx context.Context, key []byte) error {
	return wrap("delete console session", e.q.ConsoleSessionDelete(ctx, key))
}

// forgetConsoleSessions ends every console session of a database at
// schemaVersion: a restored backup's are those live when it was taken,
// signed out or revoked since perhaps, which a rollback must not sign in
// again. A schema older than the sessions (before migration 39) has none.
func forgetConsoleSessions(ctx context.Context, pool *pgxpool.Pool, schemaVersion int) error {
	if schemaVersion < consoleSessionsSchema {
		return nil
	}
	if err := queries.New(pool).ConsoleSessionsForget(ctx); err != nil {
		return fmt.Errorf("forget the console sessions: %w", err)
	}
	return nil
}

// consoleSessionsSchema is the migration that made console_sessions.
const consoleSessionsSchema = 39
