package batch

// RaceEnabled is raceEnabled for the external tests (package batch_test).
const RaceEnabled = raceEnabled
