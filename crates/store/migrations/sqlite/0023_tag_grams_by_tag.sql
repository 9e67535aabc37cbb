-- PostgreSQL's file of the same name finds a tag's grams by the tag's id:
-- its generic plan read every gram of the repository. SQLite's plan of these
-- triggers looks up each gram under its key (migration 0014): nothing changes here.
SELECT 1;
