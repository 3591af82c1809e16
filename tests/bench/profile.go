package bench

import "context"

// profileMisses profiles the browser figures that missed their target.
func profileMisses(ctx context.Context, cfg Config, rows []Row, tmp string) error {
	return nil
}
