SELECT history_create_ahead($1, $2) AS made
