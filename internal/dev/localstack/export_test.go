package localstack

// WebhookBacklog is how many events a Webhook holds before it drops one.
const WebhookBacklog = webhookBacklog

// LoopbackOnly is the check of every address a Webhook dials.
var LoopbackOnly = loopbackOnly

// OwnHostOnly is the Host check in front of the local stack's API.
var OwnHostOnly = ownHostOnly
