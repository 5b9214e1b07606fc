// A small function for the agent to read and change.
export function greet(name) {
  return `Hello, ${name}!`;
}
