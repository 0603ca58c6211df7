"""Layer `api`: values (Resource, statuses) and the infos a scheduling session works on."""
