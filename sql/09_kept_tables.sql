-- kept_pending: the rows of `relation` (a view or CTE name with protocol and run columns) of the match tables listed
-- in the variable named `pending` ('protocol/run' each: <family>_<kind>_pending, the tables without the file that
-- family's evaluation keeps beside them), the arguments of the SQL fallback of a view that reads a kept table.
CREATE OR REPLACE MACRO kept_pending(relation, pending) AS TABLE
SELECT * FROM query_table(relation) WHERE list_contains(getvariable(pending), protocol || '/' || run);
