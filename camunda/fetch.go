package camunda

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/jsontree"
)

// maxAsyncResponseTimeout is Camunda's own ceiling of a long poll (30
// minutes); Relais's RELAIS_PULL_MAX_WAIT is usually lower and applies too.
const maxAsyncResponseTimeout = 1_800_000

// FailureCode is the error code of a failure reported through the facade
// (POST /external-task/{id}/failure): Camunda failures carry none, and a
// process's on_error map may route it by this code.
const FailureCode = "external_task_failure"

type sortingJSON struct {
	SortBy    string `json:"sortBy"`
	SortOrder string `json:"sortOrder"`
}

type topicJSON struct {
	TopicName                   string         `json:"topicName"`
	LockDuration                *jsonInt       `json:"lockDuration"`
	Variables                   []string       `json:"variables"`
	LocalVariables              *jsonBool      `json:"localVariables"`
	BusinessKey                 *string        `json:"businessKey"`
	ProcessDefinitionID         *string        `json:"processDefinitionId"`
	ProcessDefinitionIDIn       []string       `json:"processDefinitionIdIn"`
	ProcessDefinitionKey        *string        `json:"processDefinitionKey"`
	ProcessDefinitionKeyIn      []string       `json:"processDefinitionKeyIn"`
	ProcessDefinitionVersionTag *string        `json:"processDefinitionVersionTag"`
	WithoutTenantID             *jsonBool      `json:"withoutTenantId"`
	TenantIDIn                  []string       `json:"tenantIdIn"`
	ProcessVariables            map[string]any `json:"processVariables"`
	DeserializeValues           *jsonBool      `json:"deserializeValues"`
	IncludeExtensionProperties  *jsonBool      `json:"includeExtensionProperties"`
}

type fetchRequest struct {
	WorkerID             string        `json:"workerId"`
	MaxTasks             *jsonInt      `json:"maxTasks"`
	UsePriority          *jsonBool     `json:"usePriority"`
	AsyncResponseTimeout *jsonInt      `json:"asyncResponseTimeout"`
	Topics               []topicJSON   `json:"topics"`
	Sorting              []sortingJSON `json:"sorting"`
}

// millis reads a duration in milliseconds at path: required or not, above
// zero (or zero when zeroOK), at most ceiling.
func millis(path string, ms *int64, def time.Duration, zeroOK bool, ceiling time.Duration) (time.Duration, error) {
	if ms == nil {
		return def, nil
	}
	if *ms < 0 || *ms == 0 && !zeroOK {
		if zeroOK {
			return 0, badRequest(path, "must be 0 or more (milliseconds)")
		}
		return 0, badRequest(path, "must be above 0 (milliseconds)")
	}
	if *ms > ceiling.Milliseconds() {
		return 0, boundExceeded(path, ceiling.Milliseconds(), "ms")
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

// lockMillis reads a lock's duration in milliseconds at path, as millis
// does, and refuses one shorter than engine.MinLockDuration, as the native
// protocol does: such a lock lapses before a completion can arrive, and
// each lapse spends an attempt, failing the occurrence within seconds. The
// likely mistake is a duration written in seconds.
func lockMillis(path string, ms *int64, def, ceiling time.Duration) (time.Duration, error) {
	if ms != nil && *ms < engine.MinLockDuration.Milliseconds() {
		return 0, badRequest(path, "must be at least %d milliseconds: a shorter lock lapses before a completion can arrive, and each lapse spends an attempt (is it written in seconds?)", engine.MinLockDuration.Milliseconds())
	}
	return millis(path, ms, def, false, ceiling)
}

// boundExceeded refuses a value above a ceiling (unit: "ms", "names", or
// none): bounds are rejections, never clamps. The detail names the member
// and the ceiling, which a field error would only repeat.
func boundExceeded(path string, ceiling int64, unit string) *fault.Error {
	if unit != "" {
		unit = " " + unit
	}
	return fault.New(fault.BadRequest, "bound_exceeded", "%s is above Relais's ceiling of %d%s", path, ceiling, unit)
}

func checkWorkerID(path, id string) error {
	if m := engine.WorkerIDProblem(id); m != "" {
		return badRequest(path, "%s", m)
	}
	return nil
}

// checkTopic refuses the topic filters Relais has nothing to filter on.
func checkTopic(at string, t topicJSON) error {
	switch {
	case t.BusinessKey != nil:
		return unsupported(at+"/businessKey", "a fetch claims by topic (definition) and revision, not by business key")
	case t.ProcessDefinitionID != nil:
		return unsupported(at+"/processDefinitionId", "a fetch claims by topic (definition) and revision, not by process")
	case len(t.ProcessDefinitionIDIn) > 0:
		return unsupported(at+"/processDefinitionIdIn", "a fetch claims by topic (definition) and revision, not by process")
	case t.ProcessDefinitionKey != nil:
		return unsupported(at+"/processDefinitionKey", "a fetch claims by topic (definition) and revision, not by process")
	case len(t.ProcessDefinitionKeyIn) > 0:
		return unsupported(at+"/processDefinitionKeyIn", "a fetch claims by topic (definition) and revision, not by process")
	case t.ProcessDefinitionVersionTag != nil:
		return unsupported(at+"/processDefinitionVersionTag", "Relais process versions have no tag")
	case len(t.TenantIDIn) > 0:
		return unsupported(at+"/tenantIdIn", "Relais has no tenants (every task is without tenant)")
	case len(t.ProcessVariables) > 0:
		return unsupported(at+"/processVariables", "a fetch does not filter on values")
	}
	return nil
}

// fetchAndLock claims occurrences of the topics (definition keys or
// patterns) for the worker, long-polling up to asyncResponseTimeout.
func (f *Facade) fetchAndLock(w http.ResponseWriter, r *http.Request) error {
	req, err := httpjson.Decode[fetchRequest](w, r, f.body)
	if err != nil {
		return err
	}
	if err := checkWorkerID("/workerId", req.WorkerID); err != nil {
		return err
	}
	switch {
	case req.MaxTasks == nil:
		return badRequest("/maxTasks", "is required")
	case *req.MaxTasks < 0:
		return badRequest("/maxTasks", "must be 0 or more")
	case *req.MaxTasks > jsonInt(f.bounds.MaxTasks):
		return boundExceeded("/maxTasks", int64(f.bounds.MaxTasks), "")
	}
	if t := req.AsyncResponseTimeout; t != nil && *t > maxAsyncResponseTimeout {
		return badRequest("/asyncResponseTimeout", "the asynchronous response timeout cannot be set to a value greater than %d milliseconds", maxAsyncResponseTimeout)
	}
	wait, err := millis("/asyncResponseTimeout", (*int64)(req.AsyncResponseTimeout), 0, true, f.bounds.MaxWait)
	if err != nil {
		return err
	}
	for i, s := range req.Sorting {
		at := "/sorting/" + strconv.Itoa(i)
		if s.SortBy != "createTime" {
			return badRequest(at+"/sortBy", "must be createTime")
		}
		if s.SortOrder == "" {
			return badRequest(at+"/sortOrder", "is required with sortBy (asc: Relais claims oldest first, after priority)")
		}
		if s.SortOrder != "asc" {
			// Relais claims by priority, then by the time an occurrence
			// became available (its creation for a first offer), then id.
			return unsupported(at+"/sortOrder", "occurrences are claimed oldest first (after priority); desc cannot be honoured")
		}
	}
	subs := make([]engine.Subscription, len(req.Topics))
	locks := make([]time.Duration, len(req.Topics))
	lock := time.Duration(0)
	// A name no input can have is left out of the subscription and said
	// with what the engine finds of the others, in one answer (verifier
	// QA: two rounds); fieldAt maps each field the engine judges back to
	// its index in the topic's variables.
	var nameErrs []fault.FieldError
	fieldAt := make([][]int, len(req.Topics))
	for i, t := range req.Topics {
		at := "/topics/" + strconv.Itoa(i)
		if t.TopicName == "" {
			return badRequest(at+"/topicName", "is required")
		}
		if err := checkTopic(at, t); err != nil {
			return err
		}
		if locks[i], err = lockMillis(at+"/lockDuration", (*int64)(t.LockDuration), f.bounds.DefaultLockDuration, f.bounds.MaxLockDuration); err != nil {
			return err
		}
		lock = max(lock, locks[i])
		// variables choose what a task carries, not which tasks come:
		// a revision without one of them is fetched all the same, as
		// Camunda answers a variable no task has with nothing.
		subs[i] = engine.Subscription{Definition: t.TopicName, Project: true}
		if len(t.Variables) > engine.MaxDeclaredFields {
			return boundExceeded(at+"/variables", engine.MaxDeclaredFields, "names")
		}
		if len(t.Variables) > 0 {
			// Declared fields: the worker receives only these inputs.
			for j, name := range t.Variables {
				if !contracts.IsFieldName(name) {
					// Said as the name sent, not as the pointer made of it
					// (Camunda QA: "obj/a" came back as /obj~1a).
					msg := fmt.Sprintf("%q is no input's name: a variable is a top-level input, named in lower-case letters, digits and _, from a letter", name)
					if snake := snakeCase(name); contracts.IsFieldName(snake) && f.grantedInput(r.Context(), t.TopicName, snake) {
						// customerName for customer_name, a migrated
						// worker's usual spelling (verifier QA), when
						// an input has that name (Camunda QA: one
						// none had was suggested).
						msg += fmt.Sprintf(" (did you mean %q?)", snake)
					}
					nameErrs = append(nameErrs, fault.FieldError{Path: at + "/variables/" + strconv.Itoa(j), Message: msg})
					continue
				}
				subs[i].Fields = append(subs[i].Fields, jsontree.Pointer("", name))
				fieldAt[i] = append(fieldAt[i], j)
			}
		}
	}
	if len(req.Topics) == 0 {
		encode(w, http.StatusOK, []lockedTask{})
		return nil
	}
	caller, _ := auth.FromContext(r.Context())
	pairs, err := f.eng.ResolveSubscriptionsLoosely(r.Context(), caller.ConsumerID, subs)
	if err != nil {
		err = renamePaths(err, req.Topics, fieldAt)
	}
	if len(nameErrs) > 0 {
		// With the engine's problems of the same kind (a variable the
		// inputs lack, an output); another (a topic not granted) waits
		// for the names to be fixed.
		if fe, ok := fault.As(err); ok && fe.Kind == fault.BadRequest {
			nameErrs = append(nameErrs, fe.Errors...)
		}
		return engine.Refusal("the request", nameErrs, nil)
	}
	if err != nil {
		return err
	}
	if *req.MaxTasks == 0 {
		// Asks for nothing, but its topics are judged as a fetch's: a
		// topic not granted is refused whatever the count.
		encode(w, http.StatusOK, []lockedTask{})
		return nil
	}
	if err := f.hub.Refusal(); err != nil {
		return err
	}
	// Listed in the worker catalog as the pull protocol's pollers are.
	f.eng.SeePoller(r.Context(), engine.PollerSighting{Protocol: engine.ProtocolCamunda, ConsumerID: caller.ConsumerID, WorkerID: req.WorkerID,
		Subscriptions: subs, Pairs: pairs, LiveFor: wait + engine.LiveHeartbeats*f.heartbeat})
	claim := engine.ClaimRequest{ConsumerID: caller.ConsumerID, WorkerID: req.WorkerID, Pairs: pairs, MaxTasks: int(*req.MaxTasks), LockDuration: lock}
	still := func(ctx context.Context) error {
		_, err := principal(r.WithContext(ctx), f.lookup)
		return err
	}
	got, err := f.hub.ClaimOrWait(r.Context(), f.eng, claim, wait, still)
	f.fetches.Waited(err)
	if wait > 0 && err != nil && r.Context().Err() != nil {
		f.eng.PollerLeft(r.Context(), caller.ConsumerID, req.WorkerID, f.heartbeat)
	}
	if err != nil {
		return err
	}
	out := make([]lockedTask, 0, len(got))
	for _, res := range got {
		topic := topicFor(req.Topics, res.Definition)
		t := req.Topics[topic]
		if locks[topic] < lock {
			// One claim locks for the longest duration asked; a topic that
			// asked less gets its own.
			f.shortenLock(r.Context(), caller.ConsumerID, req.WorkerID, &res, locks[topic])
		}
		task, err := f.lockedTask(r.Context(), res, req.WorkerID, t)
		if err != nil {
			return err
		}
		out = append(out, task)
	}
	f.fetches.Answered(len(out), len(out))
	encode(w, http.StatusOK, out)
	return nil
}

// topicFor is the index of the topic a task of definition key answers:
// its own key's, else the longest pattern matching it, as the Go SDK
// routes. Clients find their handler by the answer's topicName, so it
// must be that topic.
func topicFor(topics []topicJSON, key string) int {
	at, longest := 0, -1
	for i, t := range topics {
		switch {
		case t.TopicName == key:
			return i
		case engine.KeyMatches(t.TopicName, key) && len(t.TopicName) > longest:
			at, longest = i, len(t.TopicName)
		}
	}
	return at
}

// shortenLock sets res's lock to d from now. Failing that, the longer lock
// stays: the worker holds the occurrence a while longer, nothing is lost.
func (f *Facade) shortenLock(ctx context.Context, consumerID int64, workerID string, res *engine.Reservation, d time.Duration) {
	until, err := f.eng.SetLock(ctx, engine.WorkerRef{ConsumerID: consumerID, WorkerID: workerID, Occurrence: res.ID}, d)
	if err != nil {
		f.logger.WarnContext(ctx, "camunda: the lock of a claimed occurrence could not be set to its topic's duration", "occurrence", res.ID, "err", err)
		return
	}
	res.LockExpiresAt = until
}

// renamePaths rewrites the pointers of the engine's subscription problems
// (/subscriptions/N/definition, /subscriptions/N/fields/M) into the
// request's (/topics/N/topicName, /topics/N/variables/M).
func renamePaths(err error, topics []topicJSON, fieldAt [][]int) error {
	fe, ok := fault.As(err)
	if !ok || len(fe.Errors) == 0 {
		return err
	}
	out := *fe
	out.Errors = make([]fault.FieldError, len(fe.Errors))
	for i, e := range fe.Errors {
		toks, perr := jsontree.SplitPointer(e.Path)
		if perr == nil && len(toks) >= 3 && toks[0] == "subscriptions" {
			toks[0] = "topics"
			switch toks[2] {
			case "definition":
				toks[2] = "topicName"
			case "fields":
				toks[2] = "variables"
				e.Message = variableAt(toks, e.Message, topics, fieldAt)
			}
			e.Path = jsontree.Pointer("", toks...)
		}
		out.Errors[i] = e
	}
	return &out
}

// variableAt rewrites a problem of a field the engine judged
// (/topics/N/variables/M in toks, M among the fields subscribed): M
// becomes the index of its variable in the request, names refused before
// it left out, and msg says the variable by the name the worker sent
// (Camunda QA: "nope" came back as `"/nope" has no input at /nope`),
// which it returns.
func variableAt(toks []string, msg string, topics []topicJSON, fieldAt [][]int) string {
	if len(toks) != 4 {
		return msg
	}
	i, err1 := strconv.Atoi(toks[1])
	j, err2 := strconv.Atoi(toks[3])
	if err1 != nil || err2 != nil || i >= len(fieldAt) || j >= len(fieldAt[i]) {
		return msg
	}
	j = fieldAt[i][j]
	toks[3] = strconv.Itoa(j)
	name := topics[i].Variables[j]
	pointer := jsontree.Pointer("", name)
	msg = strings.Replace(msg, strconv.Quote(pointer)+" has no input at "+pointer, strconv.Quote(name)+" is no input's name", 1)
	if before, meant, ok := strings.Cut(msg, " (did you mean /"); ok && !strings.Contains(meant, "/") {
		// A variable is a name, and so is what it meant.
		msg = before + " (did you mean " + strconv.Quote(strings.TrimSuffix(meant, "?)")) + "?)"
	}
	return strings.Replace(msg, strconv.Quote(pointer), strconv.Quote(name), 1)
}

// snakeCase spells a camelCase name as contracts name fields:
// customerName is customer_name, Name is name.
func snakeCase(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// grantedInput reports whether an input of a revision of topic the caller
// is granted is named name: a suggestion must name an input that is
// there. A topic that is a pattern, or unknown, has none.
func (f *Facade) grantedInput(ctx context.Context, topic, name string) bool {
	caller, _ := auth.FromContext(ctx)
	granted, err := f.eng.GrantedRevisions(ctx, caller.ConsumerID, topic)
	if err != nil || len(granted) == 0 {
		return false
	}
	revs, err := f.eng.ListRevisions(ctx, topic)
	if err != nil {
		return false
	}
	for _, rev := range revs {
		if !slices.Contains(granted, rev.Revision) {
			continue
		}
		for _, field := range rev.Working.Inputs.Fields {
			if field.Name == name {
				return true
			}
		}
	}
	return false
}
