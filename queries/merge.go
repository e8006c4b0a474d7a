package queries

// Merge is how a one-row write (a ":exec" query whose answer is never read)
// runs for many rows in one statement: Many takes as its nth parameter the
// array of the rows' nth parameters of the one-row query. One statement
// instead of one per row spares PostgreSQL a statement's fixed work per
// row (its executor, opening every index of the table), which for these
// narrow writes is a third of their cost.
//
// The engine sends merged writes in Rank order rather than in the order
// they were issued (engine/merge.go), which is safe only for writes that
// touch nothing but their own row (Key, a uuid) and that see no other
// merged kind's rows but through a foreign key Rank orders: no ON
// CONFLICT, no trigger, no subquery on another table. A write that does
// not fit must not be listed here.
type Merge struct {
	Many string
	// Table and Key name the row the write changes: Key is the index of
	// its id among the parameters, -1 when it changes no row (a
	// notification).
	Table string
	Key   int
	// Rank orders the merged statements: a row a later one references (an
	// occurrence's instance, by its foreign key) is inserted first.
	Rank int
}

// Merges are the writes that merge, by the SQL of the one-row query.
var Merges = map[string]*Merge{
	instanceInsertNew:   {Many: instanceInsertNewMany, Table: "instances", Key: 0, Rank: 0},
	occurrenceInsertNew: {Many: occurrenceInsertNewMany, Table: "occurrences", Key: 0, Rank: 1},
	occurrenceComplete:  {Many: occurrenceCompleteMany, Table: "occurrences", Key: 5, Rank: 2},
	instanceEnd:         {Many: instanceEndMany, Table: "instances", Key: 4, Rank: 3},
	notify:              {Many: notifyMany, Key: -1, Rank: 4},
}
