DROP TABLE used_tickets;
