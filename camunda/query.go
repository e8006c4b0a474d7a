package camunda

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
)

// maxResults bounds one page of GET /external-task, and is its size when
// the client gives none (Camunda would answer everything).
const maxResults = 1000

// sortOrders maps Camunda's sortBy onto the engine's orders. Relais has no
// process definition id and no tenant (null for every task): sorting by
// them leaves the id order. Ids are UUIDv7, made as the occurrence is:
// their order is creation order (createTime, Camunda 7.21).
var sortOrders = map[string]string{
	"id":                   engine.OpenByID,
	"createTime":           engine.OpenByID,
	"lockExpirationTime":   engine.OpenByLockEnd,
	"processInstanceId":    engine.OpenByInstance,
	"processDefinitionId":  engine.OpenByID,
	"processDefinitionKey": engine.OpenByProcess,
	"taskPriority":         engine.OpenByPriority,
	"tenantId":             engine.OpenByID,
}

// queryReader reads Camunda query parameters, collecting every problem.
type queryReader struct {
	q    url.Values
	errs []fault.FieldError
	// none is set by a filter nothing can match (a member Relais writes as
	// null for every task, such as executionId or tenantIdIn).
	none bool
}

func (qr *queryReader) str(name string) string { return strings.TrimSpace(qr.q.Get(name)) }

func (qr *queryReader) fail(name, msg string) {
	qr.errs = append(qr.errs, fault.FieldError{Path: name, Message: msg})
}

// flag reads a boolean; false and absent are the same, as in Camunda
// ("false matches any external task").
func (qr *queryReader) flag(name string) bool {
	switch s := qr.str(name); s {
	case "", "false":
		return false
	case "true":
		return true
	default:
		qr.fail(name, "Cannot set query parameter '"+name+"' to value '"+s+"': must be true or false")
		return false
	}
}

// list reads a value and a comma-separated In list as one set: nil when
// neither is given, their intersection when both are.
func (qr *queryReader) list(one, in string) []string {
	var set []string
	given := false
	if s := qr.str(one); s != "" {
		set, given = []string{s}, true
	}
	if s := qr.str(in); s != "" {
		var items []string
		for _, it := range strings.Split(s, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		if given {
			set = slices.DeleteFunc(set, func(v string) bool { return !slices.Contains(items, v) })
		} else {
			set, given = items, true
		}
	}
	if given && set == nil {
		set = []string{}
	}
	return set
}

// ids reads a set of ids; an id that is not an occurrence's matches nothing.
func (qr *queryReader) ids(one, in string) []uuid.UUID {
	set := qr.list(one, in)
	if set == nil {
		return nil
	}
	out := []uuid.UUID{}
	for _, s := range set {
		if id, err := uuid.Parse(s); err == nil {
			out = append(out, id)
		}
	}
	return out
}

func (qr *queryReader) integer(name string) *int {
	s := qr.str(name)
	if s == "" {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		qr.fail(name, "Cannot set query parameter '"+name+"' to value '"+s+"': must be an integer")
		return nil
	}
	v := int(max(min(n, 1<<31-1), -1<<31))
	return &v
}

// openFilter reads the filters of GET /external-task and its count.
func openFilter(q url.Values) (engine.OpenFilter, bool, error) {
	qr := &queryReader{q: q}
	for name, values := range q {
		// PostgreSQL stores no NUL character and no bytes that are not
		// UTF-8: refused here, they are bad input (400), not a failed
		// query (500).
		for _, v := range values {
			if why := httpjson.UnstorableText(v); why != "" {
				qr.fail(name, why)
				break
			}
		}
	}
	var f engine.OpenFilter
	f.IDs = qr.ids("externalTaskId", "externalTaskIdIn")
	f.Definition = qr.str("topicName")
	f.WorkerID = qr.str("workerId")
	locked, notLocked := qr.flag("locked"), qr.flag("notLocked")
	switch {
	case locked && notLocked:
		qr.none = true
	case locked, notLocked:
		f.Locked = &locked
	}
	left, noneLeft := qr.flag("withRetriesLeft"), qr.flag("noRetriesLeft")
	switch {
	case left && noneLeft:
		qr.none = true
	case left, noneLeft:
		f.HasRemaining = &left
	}
	for _, name := range []string{"lockExpirationAfter", "lockExpirationBefore"} {
		if s := qr.str(name); s != "" {
			t, ok := parseDate(s)
			if !ok {
				qr.fail(name, "Cannot set query parameter '"+name+"' to value '"+s+"': must be a date as yyyy-MM-dd'T'HH:mm:ss.SSSZ")
				continue
			}
			if name == "lockExpirationAfter" {
				f.LockExpiresAfter = &t
			} else {
				f.LockExpiresBefore = &t
			}
		}
	}
	f.Nodes = qr.list("activityId", "activityIdIn")
	f.Instances = qr.ids("processInstanceId", "processInstanceIdIn")
	f.ProcessKeys = qr.list("processDefinitionKey", "processDefinitionKeyIn")
	f.MinPriority = qr.integer("priorityHigherThanOrEquals")
	f.MaxPriority = qr.integer("priorityLowerThanOrEquals")
	// Members Relais writes as null for every task: a filter on them
	// matches nothing.
	for _, name := range []string{"executionId", "processDefinitionId", "tenantIdIn", "processDefinitionName", "processDefinitionNameLike"} {
		if qr.str(name) != "" {
			qr.none = true
		}
	}
	qr.flag("active") // every task is active
	if qr.flag("suspended") {
		qr.none = true
	}
	qr.flag("variableNamesIgnoreCase")
	qr.flag("variableValuesIgnoreCase")
	if qr.str("processVariables") != "" {
		return f, false, unsupported("processVariables", "external tasks are not filtered on values")
	}
	if len(qr.errs) > 0 {
		return f, false, fault.New(fault.BadRequest, "invalid_request", "the query is invalid").WithErrors(qr.errs)
	}
	return f, qr.none, nil
}

// listTasks answers GET /external-task: the consumer's open occurrences
// (available, reserved or deferred) its grants cover.
func (f *Facade) listTasks(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	filter, none, err := openFilter(q)
	if err != nil {
		return err
	}
	qr := &queryReader{q: q}
	sortBy, order := qr.str("sortBy"), qr.str("sortOrder")
	switch {
	case (sortBy == "") != (order == ""):
		return badRequest("sortBy", "Only a single sorting parameter specified. sortBy and sortOrder required")
	case sortBy != "":
		s, ok := sortOrders[sortBy]
		if !ok {
			return badRequest("sortBy", "Cannot set query parameter 'sortBy' to value '%s'", sortBy)
		}
		if order != "asc" && order != "desc" {
			return badRequest("sortOrder", "Cannot set query parameter 'sortOrder' to value '%s'", order)
		}
		filter.SortBy, filter.Descending = s, order == "desc"
	}
	first, size := qr.integer("firstResult"), qr.integer("maxResults")
	if len(qr.errs) > 0 {
		return fault.New(fault.BadRequest, "invalid_request", "the query is invalid").WithErrors(qr.errs)
	}
	filter.Limit = maxResults
	if first != nil {
		if *first < 0 {
			return badRequest("firstResult", "must be 0 or more")
		}
		filter.Offset = *first
	}
	if size != nil {
		switch {
		case *size < 0:
			return badRequest("maxResults", "must be 0 or more")
		case *size > maxResults:
			return boundExceeded("maxResults", maxResults, "")
		}
		filter.Limit = *size
	}
	out := []externalTask{}
	if none || filter.Limit == 0 {
		encode(w, http.StatusOK, out)
		return nil
	}
	p, _ := auth.FromContext(r.Context())
	occs, err := f.eng.ListOpen(r.Context(), p.ConsumerID, filter)
	if err != nil {
		return err
	}
	for _, o := range occs {
		out = append(out, taskOf(o, p.ConsumerID))
	}
	encode(w, http.StatusOK, out)
	return nil
}

// countTasks answers GET /external-task/count: {"count": n}.
func (f *Facade) countTasks(w http.ResponseWriter, r *http.Request) error {
	filter, none, err := openFilter(r.URL.Query())
	if err != nil {
		return err
	}
	var n int64
	if !none {
		p, _ := auth.FromContext(r.Context())
		if n, err = f.eng.CountOpen(r.Context(), p.ConsumerID, filter); err != nil {
			return err
		}
	}
	encode(w, http.StatusOK, map[string]int64{"count": n})
	return nil
}

// getTask answers GET /external-task/{id}: an open occurrence of the
// consumer's grants; a settled one is no longer an external task (404).
func (f *Facade) getTask(w http.ResponseWriter, r *http.Request) error {
	if chi.URLParam(r, "id") == "topic-names" {
		// Camunda's list of topic names, which the facade does not
		// serve (a consumer's topics are its grants): said as what it
		// is, not as a task of id "topic-names" that does not exist.
		encode(w, http.StatusNotFound, exception{Type: notFoundException, Message: "not_found: GET " + r.URL.Path + " is not served by the facade: a consumer's topics are the definitions it is granted (an admin reads them with GET /api/v1/consumers)"})
		return nil
	}
	id, err := taskID(r)
	if err != nil {
		return err
	}
	p, _ := auth.FromContext(r.Context())
	o, err := f.eng.ConsumerOccurrence(r.Context(), p.ConsumerID, id)
	if err != nil {
		return taskError(id, err)
	}
	switch o.Status {
	case engine.StatusAvailable:
	case engine.StatusReserved, engine.StatusDeferred:
		if !heldBy(o, p.ConsumerID) {
			// Another consumer's live lock or deferral is its own, as
			// in the list.
			return taskNotFound(id.String())
		}
	default:
		return taskNotFound(id.String())
	}
	encode(w, http.StatusOK, taskOf(o, p.ConsumerID))
	return nil
}
