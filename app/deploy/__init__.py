"""Running a team deployment on one machine (`make team`) and the nginx configuration it renders."""
