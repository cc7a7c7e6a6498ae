
tiny