// Package group is Strata's consumer-group coordinator: membership,
// generations, partition assignment and committed offsets.
package group
